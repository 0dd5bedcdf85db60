#!/usr/bin/env python
# Follows the scheduler's job counts from the agent's unsolicited data indications, as a monitoring console of
# HTCondor's QMF plugins did (qmf.console, Python 2, Session(rcvObjects=True) and a Console's objectProps), asking
# for nothing:  watch.py URL SECONDS
# Prints "ready" once its session is bound, then "scheduler <TotalJobAds>" whenever the count it is told differs from
# the last one, and stops after SECONDS.
import sys
import time

from qmf.console import Console, Session


class Watcher(Console):
    def __init__(self):
        self.last = None

    def objectProps(self, broker, record):
        key = record.getClassKey()
        if (key.getPackageName(), key.getClassName()) != ("com.redhat.grid", "scheduler"):
            return
        total = record.TotalJobAds
        if total != self.last:
            self.last = total
            sys.stdout.write("scheduler %d\n" % total)
            sys.stdout.flush()


session = Session(Watcher(), rcvObjects=True, rcvEvents=False, rcvHeartbeats=True, manageConnections=False)
broker = session.addBroker(sys.argv[1])
sys.stdout.write("ready\n")
sys.stdout.flush()
try:
    time.sleep(float(sys.argv[2]))
finally:
    session.delBroker(broker)
