package example;

import birdbath.Usage;
import condor.Base64DataAndStatus;
import condor.ClassAdStruct;
import condor.ClassAdStructAndStatus;
import condor.CondorScheddPortType;
import condor.FileInfo;
import condor.FileInfoArray;
import condor.HashType;
import condor.StatusCode;
import condor.Transaction;
import condor.UniverseType;

import java.io.File;
import java.nio.file.Files;
import java.util.Arrays;

/**
 * Submit a program with an input file, wait for it, and fetch everything it wrote:
 * {@code SubmitJob URL PROGRAM INPUT OUTPUT-DIR}. The program runs as {@code PROGRAM INPUT} with its
 * standard output in job.out; the exit status of this command is the job's exit code.
 */
public final class SubmitJob {
    private static final int CHUNK = 4096;

    public static void main(String[] args) throws Exception {
        Usage usage = new Usage("SubmitJob URL PROGRAM INPUT OUTPUT-DIR", args, 4, 4);
        File program = usage.existing(1, "PROGRAM");
        File input = usage.existing(2, "INPUT");
        File output = new File(args[3]);
        CondorScheddPortType schedd = Schedd.connect(usage.url(0));

        // Until the commit succeeds the cluster exists only in this transaction: on any failure, abort it
        // rather than leave it (and the spooled files) to the schedd until the 60 s lease runs out.
        Transaction txn = Schedd.begin(schedd, 60);
        int cluster;
        int job;
        try {
            cluster = Schedd.check(schedd.newCluster(txn), "newCluster");
            job = Schedd.check(schedd.newJob(txn, cluster), "newJob");
            for (File file : new File[] {program, input}) {
                byte[] data = Files.readAllBytes(file.toPath());
                Schedd.check(schedd.declareFile(txn, cluster, job, file.getName(), data.length, HashType.NOHASH,
                        null), "declareFile " + file.getName());
                for (int offset = 0; offset < data.length; offset += CHUNK) {
                    byte[] chunk = Arrays.copyOfRange(data, offset, Math.min(data.length, offset + CHUNK));
                    Schedd.check(schedd.sendFile(txn, cluster, job, file.getName(), offset, chunk), "sendFile");
                }
            }
            ClassAdStructAndStatus template = schedd.createJobTemplate(cluster, job, null, UniverseType.VANILLA,
                    program.getName(), input.getName(), null);
            Schedd.check(template.getStatus(), "createJobTemplate");
            ClassAdStruct ad = Schedd.with(Schedd.value(template.getClassAd()), Schedd.string("Out", "job.out"),
                    Schedd.string("Err", "job.err"));
            Schedd.check(schedd.submit(txn, cluster, job, ad).getStatus(), "submit");
            Schedd.check(schedd.commitTransaction(txn), "commitTransaction");
        } catch (Throwable failure) {
            Schedd.abort(schedd, txn);
            throw failure;
        }
        System.out.println("submitted job " + cluster + "." + job);

        ClassAdStruct done = waitForCompletion(schedd, cluster, job);
        output.mkdirs();
        FileInfoArray files = Schedd.value(schedd.listSpool(null, cluster, job).getInfo());
        for (FileInfo info : files.getItem()) {
            byte[] data = new byte[(int) info.getSize()];
            for (int offset = 0; offset < data.length; offset += CHUNK) {
                int length = Math.min(CHUNK, data.length - offset);
                Base64DataAndStatus chunk = schedd.getFile(null, cluster, job, info.getName(), offset, length);
                Schedd.check(chunk.getStatus(), "getFile " + info.getName());
                System.arraycopy(Schedd.value(chunk.getData()), 0, data, offset, length);
            }
            Files.write(new File(output, info.getName()).toPath(), data);
            System.out.println("fetched " + info.getName() + " (" + data.length + " bytes)");
        }
        Schedd.check(schedd.closeSpool(null, cluster, job), "closeSpool");
        String code = Schedd.value(done, "ExitCode");
        System.out.println("job " + cluster + "." + job + " exited with " + code);
        System.exit(Integer.parseInt(code));
    }

    static ClassAdStruct waitForCompletion(CondorScheddPortType schedd, int cluster, int job) throws Exception {
        for (int polls = 0; polls < 1200; polls++) {
            ClassAdStructAndStatus answer = schedd.getJobAd(null, cluster, job);
            if (answer.getStatus().getCode() == StatusCode.SUCCESS) {
                ClassAdStruct ad = Schedd.value(answer.getClassAd());
                String status = Schedd.value(ad, "JobStatus");
                if ("4".equals(status)) {
                    return ad;
                }
                if ("5".equals(status)) {
                    throw new IllegalStateException("job held: " + Schedd.value(ad, "HoldReason"));
                }
            } else {
                throw new IllegalStateException("job " + cluster + "." + job + " left the queue: "
                        + Schedd.value(answer.getStatus().getMessage()));
            }
            Thread.sleep(100);
        }
        throw new IllegalStateException("job " + cluster + "." + job + " did not complete in 120 s");
    }
}
