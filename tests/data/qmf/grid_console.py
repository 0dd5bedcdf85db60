#!/usr/bin/env python
# A com.redhat.grid console in the style of HTCondor's QMF test scripts: submit with !!descriptors, read the ad
# back, edit an attribute, hold, look at the job's submission, release and remove.  Usage: grid_console.py URL IWD
import sys

from qmf.console import Session

url, iwd = sys.argv[1:3]
session = Session()
broker = session.addBroker(url)
scheduler = session.getObjects(_class="scheduler", _package="com.redhat.grid")[0]
ad = {"Cmd": "/bin/sleep", "Args": "60", "Requirements": "TRUE", "Iwd": iwd, "Owner": "nobody",
      "Submission": "grid-console-demo", "JobPrio": 5, "Recipe": "secret sauce",
      "!!descriptors": {"Requirements": "com.redhat.grid.Expression"}}
result = scheduler.SubmitJob(ad)
if result.status:
    print "SubmitJob failed:", result.status, result.text
    sys.exit(1)
print "Submitted", result.Id
job = result.Id[result.Id.rfind("#") + 1:]

jobserver = session.getObjects(_class="jobserver", _package="com.redhat.grid")[0]
jobad = jobserver.GetJobAd(job).JobAd
print "Cmd", jobad["Cmd"], "JobPrio", jobad["JobPrio"], "Requirements", jobad["Requirements"], \
    jobad["!!descriptors"]["Requirements"]

print "SetJobAttribute", scheduler.SetJobAttribute(job, "Recipe", '"hot sauce"').status, \
    scheduler.GetJobAd(job).JobAd["Recipe"]
print "HoldJob", scheduler.HoldJob(job, "held by the console").status

submission = session.getObjects(_class="submission", _package="com.redhat.grid", Name="grid-console-demo")[0]
print "Submission", submission.Name, submission.Owner, "Held", submission.Held, "Idle", submission.Idle
summaries = submission.GetJobSummaries().Jobs
print "Summary", summaries[0]["JobStatus"], summaries[0]["HoldReason"]

print "ReleaseJob", scheduler.ReleaseJob(job, "released by the console").status
print "RemoveJob", scheduler.RemoveJob(job, "removed by the console").status
again = scheduler.HoldJob(job, "too late")
print "HoldJob again", again.status, again.text
session.delBroker(broker)
