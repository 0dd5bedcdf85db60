package example;

import condor.ClassAdAttrType;
import condor.ClassAdStructAttr;
import condor.CondorScheddLocator;
import condor.CondorScheddPortType;
import condor.IntAndStatus;
import condor.Status;
import condor.StatusCode;
import condor.Transaction;
import condor.TransactionAndStatus;

import java.net.URL;
import java.util.ArrayList;
import java.util.List;

/** What every Axis 1.4 example needs: a port for a gateway URL, transactions, job ads, and status checks. */
final class Schedd {
    private Schedd() {
    }

    /**
     * A port for the gateway's address. An https URL uses the JVM's key and trust stores
     * (-Djavax.net.ssl.keyStore=... for a client certificate); -Dbirdbath.username and -Dbirdbath.password send HTTP
     * Basic credentials instead (the gateway accepts them over TLS only).
     */
    static CondorScheddPortType connect(String url) throws Exception {
        CondorScheddPortType port = new CondorScheddLocator().getcondorSchedd(new URL(url));
        String username = System.getProperty("birdbath.username");
        if (username != null) {
            org.apache.axis.client.Stub stub = (org.apache.axis.client.Stub) port;
            stub.setUsername(username);
            stub.setPassword(System.getProperty("birdbath.password", ""));
        }
        return port;
    }

    /** Axis names the hyphenated enum values by position: value1 = INTEGER-ATTR, value3 = STRING-ATTR, ... */
    static ClassAdStructAttr string(String name, String value) {
        return new ClassAdStructAttr(name, ClassAdAttrType.value3, value);
    }

    static ClassAdStructAttr integer(String name, long value) {
        return new ClassAdStructAttr(name, ClassAdAttrType.value1, Long.toString(value));
    }

    static ClassAdStructAttr expression(String name, String value) {
        return new ClassAdStructAttr(name, ClassAdAttrType.value4, value);
    }

    static String value(ClassAdStructAttr[] ad, String name) {
        for (ClassAdStructAttr attr : ad == null ? new ClassAdStructAttr[0] : ad) {
            if (attr.getName().equals(name)) {
                return attr.getValue();
            }
        }
        return null;
    }

    static void check(Status status, String what) {
        if (!StatusCode.SUCCESS.equals(status.getCode())) {
            throw new IllegalStateException(what + " failed: " + status.getCode() + " " + status.getMessage());
        }
    }

    /** The number a call such as newCluster or newJob answered, or an exception if it failed. */
    static int check(IntAndStatus answer, String what) {
        check(answer.getStatus(), what);
        return answer.getInteger();
    }

    /** A new transaction, or an exception saying why the schedd would not begin one. */
    static Transaction begin(CondorScheddPortType schedd, int duration) throws Exception {
        TransactionAndStatus begun = schedd.beginTransaction(duration);
        check(begun.getStatus(), "beginTransaction");
        return begun.getTransaction();
    }

    /**
     * Abort a transaction that will not be committed, so that its clusters, jobs and spooled files go now rather
     * than when its lease runs out. Meant for a catch block that rethrows: a failure of the abort itself is only
     * reported, never thrown, so it cannot hide the failure that made the program give up.
     */
    static void abort(CondorScheddPortType schedd, Transaction txn) {
        try {
            check(schedd.abortTransaction(txn), "abortTransaction");
            System.err.println("aborted transaction " + txn.getId());
        } catch (Exception e) {
            System.err.println("could not abort transaction " + txn.getId() + ": " + e);
        }
    }

    /** The template attributes with some replaced or added. */
    static ClassAdStructAttr[] with(ClassAdStructAttr[] template, ClassAdStructAttr... changes) {
        List<ClassAdStructAttr> attrs = new ArrayList<>();
        for (ClassAdStructAttr attr : template) {
            boolean replaced = false;
            for (ClassAdStructAttr change : changes) {
                replaced |= change.getName().equals(attr.getName());
            }
            if (!replaced && !attr.getName().equals("MyType") && !attr.getName().equals("TargetType")
                    && !attr.getName().equals("ServerTime")) {
                attrs.add(attr);
            }
        }
        for (ClassAdStructAttr change : changes) {
            attrs.add(change);
        }
        return attrs.toArray(new ClassAdStructAttr[0]);
    }
}
