package example;

import condor.CondorScheddPortType;
import condor.Status;

/** Hold, release or remove a job: {@code ControlJob URL hold|release|remove CLUSTER PROC REASON}. */
public final class ControlJob {
    public static void main(String[] args) throws Exception {
        CondorScheddPortType schedd = Schedd.connect(args[0]);
        int cluster = Integer.parseInt(args[2]);
        int job = Integer.parseInt(args[3]);
        String reason = args[4];
        Status status;
        switch (args[1]) {
            case "hold":
                status = schedd.holdJob(null, cluster, job, reason, false, false, false);
                break;
            case "release":
                status = schedd.releaseJob(null, cluster, job, reason, false, false);
                break;
            case "remove":
                status = schedd.removeJob(null, cluster, job, reason, false);
                break;
            default:
                throw new IllegalArgumentException("action must be hold, release or remove: " + args[1]);
        }
        Schedd.check(status, args[1]);
        System.out.println(args[1] + " " + cluster + "." + job + ": " + status.getCode());
    }
}
