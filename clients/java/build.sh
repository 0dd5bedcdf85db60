#!/usr/bin/env bash
# Generate Java stubs for the condorSchedd or condorCollector service and compile the example programs against them
# (<stack>/example for a condorSchedd WSDL, <stack>/collector for a condorCollector WSDL).
#
#   clients/java/build.sh OUT NAME=WSDL [NAME=WSDL ...]
#
# For every WSDL and both stacks, Apache Axis 1.4 (WSDL2Java) and JAX-WS (wsimport), this writes
# OUT/<stack>-<NAME>/classes (stubs + examples) and OUT/<stack>-<NAME>/classpath (what `java -cp` needs).
# Everything comes from the Debian packages of PACKAGES below; there is no Maven here.
set -euo pipefail
PACKAGES="default-jdk-headless libaxis-java jaxws libwsdl4j-java libcommons-discovery-java"
here=$(cd "$(dirname "$0")" && pwd)
jars=${JAVA_JARS:-/usr/share/java}
[ $# -ge 2 ] || { sed -n '5,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
out=$1
shift

classpath() {
    local path="" jar
    for jar in "$@"; do
        [ -f "$jars/$jar.jar" ] || { echo "build.sh: missing $jars/$jar.jar (apt-get install $PACKAGES)" >&2; exit 1; }
        path="$path${path:+:}$jars/$jar.jar"
    done
    echo "$path"
}

AXIS=$(classpath axis axis-jaxrpc axis-saaj commons-discovery commons-logging wsdl4j javax.activation javax.mail)
JAXWS=$(classpath jaxws-rt jaxws-api jaxb-api jaxb-runtime jaxb-core jws-api javax.xml.soap-api saaj-impl stax-ex \
    streambuffer istack-commons-runtime metro-policy gmbal glassfish-management-api mimepull FastInfoset \
    woodstox-core stax2-api xml-resolver javax.activation geronimo-annotation-1.3-spec)

build() {  # stack name wsdl
    local stack=$1 name=$2 wsdl=$3 dir="$out/$1-$2" runtime
    rm -rf "$dir"
    mkdir -p "$dir/src" "$dir/classes"
    case $stack in
        axis)
            java -cp "$AXIS" org.apache.axis.wsdl.WSDL2Java -o "$dir/src" "$wsdl" 2>"$dir/generate.log" \
                || { cat "$dir/generate.log" >&2; exit 1; }
            runtime=$AXIS ;;
        jaxws)
            wsimport -quiet -keep -Xnocompile -s "$dir/src" -d "$dir/classes" "$wsdl" >"$dir/generate.log" 2>&1 \
                || { cat "$dir/generate.log" >&2; exit 1; }
            runtime=$JAXWS ;;
    esac
    local programs=example
    grep -q 'name="condorCollector"' "$wsdl" && programs=collector
    find "$dir/src" "$here/$stack/$programs" "$here/common" -name '*.java' > "$dir/sources"
    javac -nowarn -encoding UTF-8 -cp "$runtime" -d "$dir/classes" @"$dir/sources" 2>"$dir/compile.log" \
        || { cat "$dir/compile.log" >&2; exit 1; }
    echo "$dir/classes:$runtime" > "$dir/classpath"
    echo "built $dir"
}

for named in "$@"; do
    name=${named%%=*}
    wsdl=${named#*=}
    for stack in axis jaxws; do
        build "$stack" "$name" "$(cd "$(dirname "$wsdl")" && pwd)/$(basename "$wsdl")"
    done
done
