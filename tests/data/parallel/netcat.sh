#!/bin/bash

CONDOR_CHIRP=`condor_config_val LIBEXEC`/condor_chirp

get_job_attr_blocking() {
    while /bin/true
    do
        JobServerAddress=`$CONDOR_CHIRP get_job_attr $1`
        if [ $? -ne 0 ]; then
            echo "Chirp is broken!" 1>&2
            exit 1
        fi
        if [ "$JobServerAddress" != "UNDEFINED" ]; then
            echo "$JobServerAddress"
            exit 0
        fi
        sleep 2
    done
}

HOSTNAME=`hostname`

echo "I am $HOSTNAME, node $_CONDOR_PROCNO"

if [[ $_CONDOR_PROCNO = "0" ]]
then
    echo "I'm the server"

    # Start netcat listening on an ephemeral port (0 means kernel picks port)
    #    It will wait for a connection, then write that data to output_file
    # -d is needed or else it will give up too early.
    nc -d -l 0 > output_file &

    # pid of the nc running in the background
    NCPID=$!

    # Sleep a bit to ensure nc is running
    sleep 2

    # parse the actual port selected from netstat output
    NCPORT=`
        netstat -t -a -p 2>/dev/null |
        grep " $NCPID/nc" |
        awk -F: '{print $2}' | awk '{print $1}'
    `


    echo "Listening on $HOSTNAME $NCPORT"
    $CONDOR_CHIRP set_job_attr JobServerAddress \"${HOSTNAME}\ ${NCPORT}\"

    # Do other server things here...
    sleep 60
    echo "Here's the output:"
    cat output_file
    exit 0
fi


if [[ $_CONDOR_PROCNO = "1" ]]
then
    echo "I'm the client"

    JobServerAddress=`get_job_attr_blocking JobServerAddress`
    if [ $? -ne 0 ]; then
        echo "Chirp is broken"
        exit 1
    fi
    echo "JobServerAddress: $JobServerAddress";

    host=`echo $JobServerAddress | tr -d '"' | awk '{print $1}'`
    port=`echo $JobServerAddress | tr -d '"' | awk '{print $2}'`

    echo "Sending to $host $port"
    nc $host $port < /etc/hosts
    echo "Sent $?"

    # Don't do any other client stuff, just exit
    exit 0
fi

exit 0
