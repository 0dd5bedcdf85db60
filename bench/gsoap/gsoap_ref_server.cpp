// Speed anchor: a gSOAP server generated from the project's condorSchedd WSDL (wsdl/condorSchedd.wsdl) that answers
// every operation with fixed, well-formed replies. It measures the original toolkit's per-request cost, nothing else.
// Provenance: the (#15) anchor, ../shared/anchors/gsoap/gsoap_ref_server.cpp, copied unchanged but for this
// header. Build: bench/gsoap/build.sh   Run: gsoap_ref_server PORT [ADS_PER_GETJOBADS]
#include "soapcondorScheddService.h"
#include "condorSchedd.nsmap"
#include <cstdlib>
#include <string>

static int ads_per_query = 100;

static ns1__Status *ok(struct soap *s) {
    ns1__Status *st = soap_new_ns1__Status(s);
    st->code = ns1__StatusCode__SUCCESS;
    st->message = soap_new_std__string(s);
    *st->message = "Success";
    return st;
}

static ns1__ClassAdStruct *fixed_ad(struct soap *s, int cluster, int proc) {
    ns1__ClassAdStruct *ad = soap_new_ns1__ClassAdStruct(s);
    for (int i = 0; i < 40; i++) {
        ns1__ClassAdStructAttr *a = soap_new_ns1__ClassAdStructAttr(s);
        a->name = i == 0 ? "ClusterId" : i == 1 ? "ProcId" : "Attribute" + std::to_string(i);
        a->type = i < 2 || i % 3 == 0 ? ns1__ClassAdAttrType__INTEGER_ATTR : ns1__ClassAdAttrType__STRING_ATTR;
        a->value = i == 0 ? std::to_string(cluster) : i == 1 ? std::to_string(proc)
                                                             : (i % 3 == 0 ? std::to_string(i * 7) : "value-" + std::to_string(i));
        ad->item.push_back(a);
    }
    return ad;
}

class Ref : public condorScheddService {
  public:
    int counter = 1;
    Ref() : condorScheddService(SOAP_IO_KEEPALIVE, SOAP_IO_KEEPALIVE) {}
    condorScheddService *copy() override { return new Ref(*this); }
#define STATUS_OP(op) \
    int op(_ns1__##op *, _ns1__##op##Response &r) override { r.response = ok(soap); return SOAP_OK; }
    STATUS_OP(commitTransaction) STATUS_OP(abortTransaction) STATUS_OP(removeCluster) STATUS_OP(removeJob)
    STATUS_OP(holdJob) STATUS_OP(releaseJob) STATUS_OP(declareFile) STATUS_OP(sendFile) STATUS_OP(closeSpool)
    STATUS_OP(requestReschedule)
#define STRING_OP(op, text) \
    int op(_ns1__##op *, _ns1__##op##Response &r) override { \
        r.response = soap_new_ns1__StringAndStatus(soap); r.response->status = ok(soap); \
        r.response->message = soap_new_std__string(soap); *r.response->message = text; return SOAP_OK; }
    STRING_OP(getVersionString, "$CondorVersion: 7.2.4 reference $") STRING_OP(getPlatformString, "$CondorPlatform: ref $")
    int beginTransaction(_ns1__beginTransaction *q, _ns1__beginTransactionResponse &r) override {
        r.response = soap_new_ns1__TransactionAndStatus(soap);
        r.response->status = ok(soap);
        r.response->transaction = soap_new_ns1__Transaction(soap);
        r.response->transaction->id = (int *)soap_malloc(soap, sizeof(int));
        *r.response->transaction->id = counter++;
        r.response->transaction->duration = (int *)soap_malloc(soap, sizeof(int));
        *r.response->transaction->duration = q->duration;
        return SOAP_OK;
    }
    int extendTransaction(_ns1__extendTransaction *q, _ns1__extendTransactionResponse &r) override {
        r.response = soap_new_ns1__TransactionAndStatus(soap);
        r.response->status = ok(soap);
        r.response->transaction = q->transaction;
        return SOAP_OK;
    }
#define INT_OP(op) \
    int op(_ns1__##op *, _ns1__##op##Response &r) override { \
        r.response = soap_new_ns1__IntAndStatus(soap); r.response->status = ok(soap); \
        r.response->integer = (int *)soap_malloc(soap, sizeof(int)); *r.response->integer = counter++; return SOAP_OK; }
    INT_OP(newCluster) INT_OP(newJob)
#define REQ_OP(op) \
    int op(_ns1__##op *, _ns1__##op##Response &r) override { \
        r.response = soap_new_ns1__RequirementsAndStatus(soap); r.response->status = ok(soap); return SOAP_OK; }
    REQ_OP(submit) REQ_OP(discoverJobRequirements)
    int getJobAds(_ns1__getJobAds *, _ns1__getJobAdsResponse &r) override {
        r.response = soap_new_ns1__ClassAdStructArrayAndStatus(soap);
        r.response->status = ok(soap);
        r.response->classAdArray = soap_new_ns1__ClassAdStructArray(soap);
        for (int i = 0; i < ads_per_query; i++) r.response->classAdArray->item.push_back(fixed_ad(soap, 1 + i / 10, i % 10));
        return SOAP_OK;
    }
    int getJobAd(_ns1__getJobAd *q, _ns1__getJobAdResponse &r) override {
        r.response = soap_new_ns1__ClassAdStructAndStatus(soap);
        r.response->status = ok(soap);
        r.response->classAd = fixed_ad(soap, q->clusterId, q->jobId);
        return SOAP_OK;
    }
    int createJobTemplate(_ns1__createJobTemplate *q, _ns1__createJobTemplateResponse &r) override {
        r.response = soap_new_ns1__ClassAdStructAndStatus(soap);
        r.response->status = ok(soap);
        r.response->classAd = fixed_ad(soap, q->clusterId, q->jobId);
        return SOAP_OK;
    }
    int getFile(_ns1__getFile *, _ns1__getFileResponse &r) override {
        r.response = soap_new_ns1__Base64DataAndStatus(soap);
        r.response->status = ok(soap);
        return SOAP_OK;
    }
    int listSpool(_ns1__listSpool *, _ns1__listSpoolResponse &r) override {
        r.response = soap_new_ns1__FileInfoArrayAndStatus(soap);
        r.response->status = ok(soap);
        return SOAP_OK;
    }
};

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (argc > 2) ads_per_query = atoi(argv[2]);
    Ref server;
    server.soap->bind_flags = SO_REUSEADDR;
    if (!soap_valid_socket(server.bind("127.0.0.1", atoi(argv[1]), 100))) { server.soap_stream_fault(std::cerr); return 1; }
    for (;;) {
        if (!soap_valid_socket(server.accept())) continue;
        server.serve();
        server.destroy();
    }
}
