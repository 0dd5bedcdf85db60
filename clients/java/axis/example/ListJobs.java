package example;

import birdbath.Usage;
import condor.ClassAdStructArrayAndStatus;
import condor.ClassAdStructAttr;
import condor.CondorScheddPortType;

/** List the queue like condor_q: {@code ListJobs URL [CONSTRAINT]}, one "ID STATUS OWNER CMD" line per job. */
public final class ListJobs {
    public static void main(String[] args) throws Exception {
        Usage usage = new Usage("ListJobs URL [CONSTRAINT]", args, 1, 2);
        CondorScheddPortType schedd = Schedd.connect(usage.url(0));
        ClassAdStructArrayAndStatus answer = schedd.getJobAds(null, usage.word(1));
        Schedd.check(answer.getStatus(), "getJobAds");
        ClassAdStructAttr[][] ads = answer.getClassAdArray() == null ? new ClassAdStructAttr[0][] : answer.getClassAdArray();
        for (ClassAdStructAttr[] ad : ads) {
            System.out.println(Schedd.value(ad, "ClusterId") + "." + Schedd.value(ad, "ProcId") + " "
                    + Schedd.value(ad, "JobStatus") + " " + Schedd.value(ad, "Owner") + " " + Schedd.value(ad, "Cmd"));
        }
        System.out.println(ads.length + " jobs");
    }
}
