package collector;

import birdbath.Usage;
import condor.ClassAdStructAttr;
import condor.ClassAdType;
import condor.CondorCollectorLocator;
import condor.CondorCollectorPortType;
import condor.Status;

import java.net.URL;

/**
 * Ask a condorCollector service about the pool, as a provisioning system does with {@code queryStartdAds}:
 * {@code QueryPool URL KIND [CONSTRAINT]} prints one "MyType Name State" line per ad, KIND being startd, schedd,
 * master, submittor, license, storage or any; {@code QueryPool URL advertise TYPE NAME} advertises an ad of that
 * ClassAdType (e.g. STARTD-AD-TYPE) named NAME with insertAd and prints the service's answer.
 */
public final class QueryPool {
    public static void main(String[] args) throws Exception {
        Usage usage = Usage.ofQueryPool(args);
        URL url = new URL(usage.url(0));
        ClassAdType type = args[1].equals("advertise")
                ? usage.parsed(2, "TYPE must be a ClassAdType such as STARTD-AD-TYPE", ClassAdType::fromValue) : null;
        CondorCollectorPortType collector = new CondorCollectorLocator().getcondorCollector(url);
        if (type != null) {
            ClassAdStructAttr[] ad = {new ClassAdStructAttr("Name", condor.ClassAdAttrType.value3, args[3])};
            Status status = collector.insertAd(type, ad);
            System.out.println(status.getCode() + " " + status.getMessage());
            System.exit(status.getCode() == condor.StatusCode.SUCCESS ? 0 : 1);
        }
        String constraint = args.length > 2 ? args[2] : null;
        ClassAdStructAttr[][] ads;
        switch (args[1]) {
            case "startd": ads = collector.queryStartdAds(constraint); break;
            case "schedd": ads = collector.queryScheddAds(constraint); break;
            case "master": ads = collector.queryMasterAds(constraint); break;
            case "submittor": ads = collector.querySubmittorAds(constraint); break;
            case "license": ads = collector.queryLicenseAds(constraint); break;
            case "storage": ads = collector.queryStorageAds(constraint); break;
            default: ads = collector.queryAnyAds(constraint); break;
        }
        for (ClassAdStructAttr[] ad : ads == null ? new ClassAdStructAttr[0][] : ads) {
            System.out.println(value(ad, "MyType") + " " + value(ad, "Name") + " " + value(ad, "State"));
        }
        System.out.println((ads == null ? 0 : ads.length) + " ads");
    }

    static String value(ClassAdStructAttr[] ad, String name) {
        for (ClassAdStructAttr attr : ad == null ? new ClassAdStructAttr[0] : ad) {
            if (attr.getName().equals(name)) {
                return attr.getValue();
            }
        }
        return null;
    }
}
