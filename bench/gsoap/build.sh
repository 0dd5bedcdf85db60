#!/usr/bin/env bash
# Builds the gSOAP speed anchor: a server generated from the project's condorSchedd WSDL with Debian's gsoap tools
# (packages gsoap, libgsoap-dev, g++), answering every operation with fixed replies (getJobAds: N ads x 40
# attributes). It is the original toolkit's per-request cost on this machine, for benchmarks that report ratios
# measured in the same run. Provenance: the issue's (#15) ../shared/anchors/gsoap/build.sh, pointed at wsdl/ here
# and without its apt-get (the benchmarks skip the anchor when the tools are missing).
# usage: build.sh OUTDIR   ->   OUTDIR/gsoap_ref_server PORT [N_ADS]
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$1
mkdir -p "$out" && cd "$out"
wsdl2h -o condor.h "$here/../../wsdl/condorSchedd.wsdl" >/dev/null 2>&1
soapcpp2 -j -S -L -x condor.h >/dev/null 2>&1
g++ -O2 -DWITH_PURE_VIRTUAL -o gsoap_ref_server.tmp "$here/gsoap_ref_server.cpp" soapC.cpp soapcondorScheddService.cpp \
    -I. -lgsoap++
mv gsoap_ref_server.tmp gsoap_ref_server
echo "$out/gsoap_ref_server"
