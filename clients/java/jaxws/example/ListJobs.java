package example;

import birdbath.Usage;
import condor.ClassAdStruct;
import condor.ClassAdStructArray;
import condor.ClassAdStructArrayAndStatus;
import condor.CondorScheddPortType;

import java.util.List;

/** List the queue like condor_q: {@code ListJobs URL [CONSTRAINT]}, one "ID STATUS OWNER CMD" line per job. */
public final class ListJobs {
    public static void main(String[] args) throws Exception {
        Usage usage = new Usage("ListJobs URL [CONSTRAINT]", args, 1, 2);
        CondorScheddPortType schedd = Schedd.connect(usage.url(0));
        ClassAdStructArrayAndStatus answer = schedd.getJobAds(null, usage.word(1));
        Schedd.check(answer.getStatus(), "getJobAds");
        ClassAdStructArray array = Schedd.value(answer.getClassAdArray());
        List<ClassAdStruct> ads = array == null ? List.of() : array.getItem();
        for (ClassAdStruct ad : ads) {
            System.out.println(Schedd.value(ad, "ClusterId") + "." + Schedd.value(ad, "ProcId") + " "
                    + Schedd.value(ad, "JobStatus") + " " + Schedd.value(ad, "Owner") + " " + Schedd.value(ad, "Cmd"));
        }
        System.out.println(ads.size() + " jobs");
    }
}
