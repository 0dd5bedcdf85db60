package example;

import birdbath.Usage;
import condor.ClassAdStruct;
import condor.CondorScheddPortType;
import condor.Transaction;

import java.io.File;
import java.util.Arrays;

/**
 * Submit a DAG the way the 2009 blog post did, and wait for it: {@code SubmitDag URL OWNER DAG-FILE}.
 * The DAG file must be on a file system the gateway shares; the exit status is the DAG's.
 */
public final class SubmitDag {
    public static void main(String[] args) throws Exception {
        Usage usage = new Usage("SubmitDag URL OWNER DAG-FILE", args, 3, 3);
        String owner = args[1];
        File dagFile = usage.existing(2, "DAG-FILE").getAbsoluteFile();
        CondorScheddPortType schedd = Schedd.connect(usage.url(0));
        String dag = dagFile.getPath();

        // Until the commit succeeds the DAG job exists only in this transaction: on any failure (the schedd
        // refusing the Owner, say), abort it rather than leave it open until the 60 s lease runs out.
        Transaction txn = Schedd.begin(schedd, 60);
        int cluster;
        int job;
        try {
            cluster = Schedd.check(schedd.newCluster(txn), "newCluster");
            job = Schedd.check(schedd.newJob(txn, cluster), "newJob");
            ClassAdStruct ad = new ClassAdStruct();
            ad.getItem().addAll(Arrays.asList(
                Schedd.string("Owner", owner),
                Schedd.string("Iwd", dagFile.getParent()),
                Schedd.integer("JobUniverse", 7),
                Schedd.string("Cmd", "/usr/bin/condor_dagman"),
                Schedd.integer("JobStatus", 1),
                Schedd.string("Env", "_CONDOR_MAX_DAGMAN_LOG=0;_CONDOR_DAGMAN_LOG=" + dag + ".dagman.out"),
                Schedd.integer("JobNotification", 0),
                Schedd.string("UserLog", dag + ".dagman.log"),
                Schedd.string("RemoveKillSig", "SIGUSR1"),
                Schedd.string("Out", dag + ".stdout"),
                Schedd.string("Err", dag + ".stderr"),
                Schedd.string("ShouldTransferFiles", "NO"),
                Schedd.expression("Requirements", "TRUE"),
                Schedd.expression("OnExitRemove",
                        "(ExitSignal =?= 11 || (ExitCode =!= UNDEFINED && ExitCode >=0 && ExitCode <= 2))"),
                Schedd.expression("LeaveJobInQueue", "FilesRetrieved =?= FALSE"),
                Schedd.expression("FilesRetrieved", "FALSE"),
                Schedd.string("Arguments", "-f -l . -Debug 3 -AutoRescue 1 -DoRescueFrom 0 -Allowversionmismatch"
                        + " -Lockfile " + dag + ".lock -Dag " + dag),
                Schedd.integer("ClusterId", cluster),
                Schedd.integer("ProcId", job)));
            Schedd.check(schedd.submit(txn, cluster, job, ad).getStatus(), "submit");
            Schedd.check(schedd.commitTransaction(txn), "commitTransaction");
        } catch (Throwable failure) {
            Schedd.abort(schedd, txn);
            throw failure;
        }
        schedd.requestReschedule();
        System.out.println("submitted DAG " + dag + " as job " + cluster + "." + job);

        ClassAdStruct done = SubmitJob.waitForCompletion(schedd, cluster, job);
        Schedd.check(schedd.closeSpool(null, cluster, job), "closeSpool");
        String code = Schedd.value(done, "ExitCode");
        System.out.println("DAG " + cluster + "." + job + " exited with " + code);
        System.exit(Integer.parseInt(code));
    }
}
