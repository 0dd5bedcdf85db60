package example;

import birdbath.Usage;
import condor.CondorScheddPortType;
import condor.Status;

/** Hold, release or remove a job: {@code ControlJob URL hold|release|remove CLUSTER PROC REASON}. */
public final class ControlJob {
    public static void main(String[] args) throws Exception {
        Usage usage = new Usage("ControlJob URL hold|release|remove CLUSTER PROC REASON", args, 5, 5);
        String action = usage.oneOf(1, "the action", "hold", "release", "remove");
        int cluster = usage.number(2, "CLUSTER");
        int job = usage.number(3, "PROC");
        String reason = args[4];
        CondorScheddPortType schedd = Schedd.connect(usage.url(0));
        Status status;
        switch (action) {
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
                throw new AssertionError(action);  // (oneOf admits no other)
        }
        Schedd.check(status, action);
        System.out.println(action + " " + cluster + "." + job + ": " + status.getCode());
    }
}
