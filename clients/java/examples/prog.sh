#!/bin/sh
# the example program: its input (the first argument) in capitals
tr a-z A-Z < "$1"
