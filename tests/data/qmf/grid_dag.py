#!/usr/bin/env python
# A DAG submitted through com.redhat.grid's SubmitJob, the way MRG's DAG scripts did: a scheduler-universe
# condor_dagman job with condor_submit_dag's arguments, then its ad polled until it completes; then a node's output
# fetched with FetchJobData.  Usage: grid_dag.py URL DIR DAG (DIR holds DAG and its nodes' submit files)
import sys
import time

from qmf.console import Session

url, iwd, dag = sys.argv[1:4]
EXPR = "com.redhat.grid.Expression"
session = Session()
broker = session.addBroker(url)
scheduler = session.getObjects(_class="scheduler", _package="com.redhat.grid")[0]
ad = {"Cmd": "/usr/bin/condor_dagman",
      "Args": "-f -l . -Debug 3 -AutoRescue 1 -DoRescueFrom 0 -Allowversionmismatch -Lockfile %s.lock -Dag %s"
              % (dag, dag),
      "JobUniverse": 7, "Iwd": iwd, "Owner": "nobody", "Requirements": "TRUE", "Submission": "my-dag",
      "Out": dag + ".lib.out", "Err": dag + ".lib.err", "UserLog": iwd + "/" + dag + ".dagman.log",
      "Env": "_CONDOR_MAX_DAGMAN_LOG=0;_CONDOR_DAGMAN_LOG=%s.dagman.out" % dag, "RemoveKillSig": "SIGUSR1",
      "OnExitRemove": "( ExitSignal =?= 11 || (ExitCode =!= UNDEFINED && ExitCode >= 0 && ExitCode <= 2))",
      "!!descriptors": {"Requirements": EXPR, "OnExitRemove": EXPR}}
result = scheduler.SubmitJob(ad)
if result.status:
    print "SubmitJob failed:", result.status, result.text
    sys.exit(1)
job = result.Id.split("#")[-1]
print "Submitted DAG", result.Id
deadline = time.time() + 120
while True:
    jobad = scheduler.GetJobAd(job).JobAd
    if jobad["JobStatus"] in (3, 4) or time.time() > deadline:
        break
    time.sleep(1)
print "DAG JobStatus", jobad["JobStatus"], "ExitCode", jobad.get("ExitCode")
for submission in session.getObjects(_class="submission", _package="com.redhat.grid"):
    print "Submission", submission.Name, "Completed", submission.Completed
session.delBroker(broker)
