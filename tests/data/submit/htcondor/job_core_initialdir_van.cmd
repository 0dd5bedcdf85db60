universe = vanilla
executable =  /bin/date
initialdir = initd_van
log = job_core_initialdir_van.log
output = job_core_initialdir_van.out
error = job_core_initialdir_van.err
getenv=true
Notification = NEVER
queue


