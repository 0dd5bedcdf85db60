package example;

import condor.ClassAdAttrType;
import condor.ClassAdStruct;
import condor.ClassAdStructAttr;
import condor.CondorSchedd;
import condor.CondorScheddPortType;
import condor.IntAndStatus;
import condor.Status;
import condor.StatusCode;
import condor.Transaction;
import condor.TransactionAndStatus;

import javax.xml.bind.JAXBElement;
import javax.xml.ws.BindingProvider;

/** What every JAX-WS example needs: a port for a gateway URL, transactions, job ads, and status checks. */
final class Schedd {
    private Schedd() {
    }

    /**
     * The service as generated (its compiled-in WSDL), pointed at the gateway's address. An https URL uses the JVM's
     * key and trust stores (-Djavax.net.ssl.keyStore=... for a client certificate); -Dbirdbath.username and
     * -Dbirdbath.password send HTTP Basic credentials instead (the gateway accepts them over TLS only).
     */
    static CondorScheddPortType connect(String url) {
        CondorScheddPortType port = new CondorSchedd().getCondorSchedd();
        java.util.Map<String, Object> context = ((BindingProvider) port).getRequestContext();
        context.put(BindingProvider.ENDPOINT_ADDRESS_PROPERTY, url);
        String username = System.getProperty("birdbath.username");
        if (username != null) {
            context.put(BindingProvider.USERNAME_PROPERTY, username);
            context.put(BindingProvider.PASSWORD_PROPERTY, System.getProperty("birdbath.password", ""));
        }
        return port;
    }

    static ClassAdStructAttr attr(String name, ClassAdAttrType type, String value) {
        ClassAdStructAttr attr = new ClassAdStructAttr();
        attr.setName(name);
        attr.setType(type);
        attr.setValue(value);
        return attr;
    }

    static ClassAdStructAttr string(String name, String value) {
        return attr(name, ClassAdAttrType.STRING_ATTR, value);
    }

    static ClassAdStructAttr integer(String name, long value) {
        return attr(name, ClassAdAttrType.INTEGER_ATTR, Long.toString(value));
    }

    static ClassAdStructAttr expression(String name, String value) {
        return attr(name, ClassAdAttrType.EXPRESSION_ATTR, value);
    }

    static <T> T value(JAXBElement<T> element) {
        return element == null || element.isNil() ? null : element.getValue();
    }

    static String value(ClassAdStruct ad, String name) {
        for (ClassAdStructAttr attr : ad == null ? java.util.List.<ClassAdStructAttr>of() : ad.getItem()) {
            if (attr.getName().equals(name)) {
                return attr.getValue();
            }
        }
        return null;
    }

    static void check(Status status, String what) {
        if (status.getCode() != StatusCode.SUCCESS) {
            throw new IllegalStateException(what + " failed: " + status.getCode() + " " + value(status.getMessage()));
        }
    }

    /** The number a call such as newCluster or newJob answered, or an exception if it failed. */
    static int check(IntAndStatus answer, String what) {
        check(answer.getStatus(), what);
        return answer.getInteger();
    }

    /** A new transaction, or an exception saying why the schedd would not begin one. */
    static Transaction begin(CondorScheddPortType schedd, int duration) {
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
    static ClassAdStruct with(ClassAdStruct template, ClassAdStructAttr... changes) {
        ClassAdStruct ad = new ClassAdStruct();
        for (ClassAdStructAttr attr : template.getItem()) {
            boolean replaced = false;
            for (ClassAdStructAttr change : changes) {
                replaced |= change.getName().equals(attr.getName());
            }
            if (!replaced && !attr.getName().equals("MyType") && !attr.getName().equals("TargetType")
                    && !attr.getName().equals("ServerTime")) {
                ad.getItem().add(attr);
            }
        }
        for (ClassAdStructAttr change : changes) {
            ad.getItem().add(change);
        }
        return ad;
    }
}
