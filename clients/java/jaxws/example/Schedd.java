package example;

import condor.ClassAdAttrType;
import condor.ClassAdStruct;
import condor.ClassAdStructAttr;
import condor.CondorSchedd;
import condor.CondorScheddPortType;
import condor.Status;
import condor.StatusCode;

import javax.xml.bind.JAXBElement;
import javax.xml.ws.BindingProvider;

/** What every JAX-WS example needs: a port for a gateway URL, job ads, and status checks. */
final class Schedd {
    private Schedd() {
    }

    /** The service as generated (its compiled-in WSDL), pointed at the gateway's address. */
    static CondorScheddPortType connect(String url) {
        CondorScheddPortType port = new CondorSchedd().getCondorSchedd();
        ((BindingProvider) port).getRequestContext().put(BindingProvider.ENDPOINT_ADDRESS_PROPERTY, url);
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
