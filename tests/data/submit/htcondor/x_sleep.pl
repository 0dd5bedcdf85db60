#!/bin/sh
# stands in for the HTCondor test program of this name: condor_submit only needs it to exist
exit 0
