package collector;

import birdbath.Usage;
import condor.ClassAdAttrType;
import condor.ClassAdStruct;
import condor.ClassAdStructArray;
import condor.ClassAdStructAttr;
import condor.ClassAdType;
import condor.CondorCollector;
import condor.CondorCollectorPortType;
import condor.Status;
import condor.StatusCode;

import java.util.List;
import javax.xml.ws.BindingProvider;

/**
 * Ask a condorCollector service about the pool, as a provisioning system does with {@code queryStartdAds}:
 * {@code QueryPool URL KIND [CONSTRAINT]} prints one "MyType Name State" line per ad, KIND being startd, schedd,
 * master, submittor, license, storage or any; {@code QueryPool URL advertise TYPE NAME} advertises an ad of that
 * ClassAdType (e.g. STARTD-AD-TYPE) named NAME with insertAd and prints the service's answer.
 */
public final class QueryPool {
    public static void main(String[] args) {
        Usage usage = Usage.ofQueryPool(args);
        String url = usage.url(0);
        ClassAdType type = args[1].equals("advertise")  // (checked before the stubs load: they write warnings)
                ? usage.parsed(2, "TYPE must be a ClassAdType such as STARTD-AD-TYPE", ClassAdType::fromValue) : null;
        CondorCollectorPortType collector = new CondorCollector().getCondorCollector();
        ((BindingProvider) collector).getRequestContext().put(BindingProvider.ENDPOINT_ADDRESS_PROPERTY, url);
        if (type != null) {
            ClassAdStructAttr name = new ClassAdStructAttr();
            name.setName("Name");
            name.setType(ClassAdAttrType.STRING_ATTR);
            name.setValue(args[3]);
            ClassAdStruct ad = new ClassAdStruct();
            ad.getItem().add(name);
            Status status = collector.insertAd(type, ad);
            System.out.println(status.getCode().value() + " " + status.getMessage().getValue());
            System.exit(status.getCode() == StatusCode.SUCCESS ? 0 : 1);
        }
        String constraint = args.length > 2 ? args[2] : null;
        ClassAdStructArray result;
        switch (args[1]) {
            case "startd": result = collector.queryStartdAds(constraint); break;
            case "schedd": result = collector.queryScheddAds(constraint); break;
            case "master": result = collector.queryMasterAds(constraint); break;
            case "submittor": result = collector.querySubmittorAds(constraint); break;
            case "license": result = collector.queryLicenseAds(constraint); break;
            case "storage": result = collector.queryStorageAds(constraint); break;
            default: result = collector.queryAnyAds(constraint); break;
        }
        List<ClassAdStruct> ads = result == null ? List.of() : result.getItem();
        for (ClassAdStruct ad : ads) {
            System.out.println(value(ad, "MyType") + " " + value(ad, "Name") + " " + value(ad, "State"));
        }
        System.out.println(ads.size() + " ads");
    }

    static String value(ClassAdStruct ad, String name) {
        for (ClassAdStructAttr attr : ad == null ? List.<ClassAdStructAttr>of() : ad.getItem()) {
            if (attr.getName().equals(name)) {
                return attr.getValue();
            }
        }
        return null;
    }
}
