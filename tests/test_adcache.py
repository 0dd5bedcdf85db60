"""Job ads written from kept texts (gateway.soap.adcache) are byte for byte what spyne writes for them; a changed job
is never answered from its old text; entries go with their ads; fresh ads per query keep nothing."""

from __future__ import annotations

import gc
import random
import sys
import threading

import classad2
import pytest

from gateway.core.adstruct import AttrType, JobAdStruct, ad_to_struct, struct_to_ad
from gateway.soap import adcache
from gateway.soap.adwriter import AdAnswers, own_items
from gateway.soap.codec import ContractService
from gateway.soap.schedd import job_ad_answers, schedd_service, struct

NOW = 1_700_000_000

AD_TEXTS = [
    "[]",
    '[Cmd = "/bin/echo"; Args = "a & b < c > d \\"q\\" \'s\' ]]>"; Empty = ""; N = 3; F = 1.25; B = true; '
    'Off = false; Neg = -7; Big = 123456789012345; Tiny = 0.000001; Huge = 1e300]',
    '[Unicode = "héllo wörld € 😀"; Req = (Arch == "X86_64") && (Memory >= 1024); CR = "line\\r\\nnext\\ttab"]',
    '[Control = "tab\\t quote \\" end"; U = undefined; Er = error; L = {1, 2}; Nested = [a = 1]; '
    'E = ifThenElse(x, "a", "b"); Same = a =?= b; Real = 1.0E3 * x]',
    '[MyType = "Other"; TargetType = "Nothing"; ServerTime = 5; ClaimId = "secret"; Capability = "x"; '
    'TransferKey = "k"; Owner = "alice"]',
]


@pytest.fixture(scope="module")
def dispatcher() -> ContractService:
    return schedd_service()


@pytest.fixture
def answers(dispatcher) -> AdAnswers:
    return job_ad_answers(dispatcher)


def ok() -> dict:
    return {"code": "SUCCESS", "message": "Success"}


#: what clients send (by type): kept expression texts, odd spacing, literals of every type, characters to escape
CLIENT_ATTRIBUTES = {
    "EXPRESSION": {"Requirements": '(VMType  =?=  "csvm")&&(Arch=="X86_64")', "Rank": "Memory * 1.0E3",
                   "Plain": "a + b", "Same": "a =?= b"},
    "STRING": {"Control": "bell\x07 and \x1f", "Weird": "<&>\r\n\x01\ufffe"},
    "INTEGER": {"Count": "42"}, "FLOAT": {"Share": "0.5"}, "BOOLEAN": {"Flag": "TRUE"},
    "UNDEFINED": {"Nothing": "UNDEFINED"},
}


def client_ads() -> list[classad2.ClassAd]:
    kept = struct_to_ad([(name, AttrType[kind], value) for kind, values in CLIENT_ATTRIBUTES.items()
                         for name, value in values.items()])
    assert kept.texts  # (the ad really keeps client texts)
    return [kept]


def all_ads() -> list[classad2.ClassAd]:
    return [classad2.parseOne(text) for text in AD_TEXTS] + client_ads()


def by_spyne(dispatcher, ads: list[classad2.ClassAd]) -> bytes:
    return dispatcher.write("getJobAds", {"status": ok(),
                                          "classAdArray": [struct(ad_to_struct(ad, NOW)) for ad in ads]})


def uncached(answers: AdAnswers, ads: list[classad2.ClassAd]) -> bytes:
    """The answer written from ``Attr`` (proved identical to spyne's by tests/test_adwriter.py, which also covers
    characters XML cannot carry, which spyne refuses)."""
    return answers.write_job_ads([ad_to_struct(ad, NOW) for ad in ads])


def test_kept_texts_are_byte_identical_to_spynes(dispatcher, answers):
    ads = [classad2.parseOne(text) for text in AD_TEXTS]
    expected = by_spyne(dispatcher, ads)
    for _ in range(4):  # written, kept, then from the kept texts
        assert answers.write_job_ads([JobAdStruct(ad, NOW) for ad in ads]) == expected
    assert answers.texts.packed_bytes > 0


def test_kept_texts_of_clients_ads_are_byte_identical(answers):
    ads = all_ads()
    expected = uncached(answers, ads)
    for _ in range(4):  # written, kept, then from the kept texts
        assert answers.write_job_ads([JobAdStruct(ad, NOW) for ad in ads]) == expected
    assert answers.texts.packed_bytes > 0
    assert b"".join(answers.stream_job_ads([JobAdStruct(ad, NOW) for ad in ads], 10)) == expected


@pytest.mark.parametrize("index", range(len(AD_TEXTS) + 1))
def test_a_job_ad_from_its_kept_text_is_byte_identical(answers, index):
    ad = all_ads()[index]
    expected = answers.write_job_ad(ad_to_struct(ad, 7))
    assert [answers.write_job_ad(JobAdStruct(ad, 7)) for _ in range(3)] == [expected] * 3


def test_server_time_is_each_answers_own(answers):
    ad = classad2.parseOne("[A = 1]")
    for now in (10, 11, 12):
        assert b"<name>ServerTime</name><type>INTEGER-ATTR</type><value>%d</value>" % now in \
            answers.write_job_ad(JobAdStruct(ad, now))


def test_a_changed_job_is_never_answered_from_its_old_text(answers):
    old = classad2.parseOne('[JobStatus = 1; Cmd = "/bin/a"]')
    for _ in range(3):
        answers.write_job_ad(JobAdStruct(old, NOW))
    new = classad2.ClassAd(str(old))  # the store replaces a changed ad, never mutates it
    new["JobStatus"] = 5
    assert b"<value>5</value>" in answers.write_job_ad(JobAdStruct(new, NOW))
    assert b"<value>1</value>" in answers.write_job_ad(JobAdStruct(old, NOW))


def test_an_ad_in_the_place_of_one_that_went_is_written_as_itself(answers):
    """A new ad may get the id (the address) of one that went: it is told apart by identity, never by id."""
    for number in range(300):
        ad = classad2.parseOne(f"[N = {number}]")
        for _ in range(3):
            assert b"<value>%d</value>" % number in answers.write_job_ad(JobAdStruct(ad, NOW))
        del ad


def test_entries_go_with_their_ads(answers):
    ads = [classad2.parseOne(f'[N = {n}; S = "job {n}"]') for n in range(2000)]
    for _ in range(2):
        answers.write_job_ads([JobAdStruct(ad, NOW) for ad in ads])
    assert len(answers.texts) == 2000 and answers.texts.packed_bytes > 0
    del ads[1000:]
    gc.collect()
    assert len(answers.texts) == 1000
    del ads[:]
    gc.collect()
    assert len(answers.texts) == 0
    answers.write_job_ads([JobAdStruct(ad, NOW) for ad in [classad2.parseOne("[A = 1]")] * 2])
    assert answers.texts.packed_bytes < 100  # the texts of the ads that went are no longer counted


def test_fresh_ads_per_query_keep_nothing(answers):
    """The htcondor backend's ads are new objects per query: no text is ever packed, and nothing stays."""
    for _ in range(3):
        fresh = [classad2.parseOne(f"[N = {n}]") for n in range(500)]
        answers.write_job_ads([JobAdStruct(ad, NOW) for ad in fresh])
        del fresh
    gc.collect()
    assert len(answers.texts) == 0 and answers.texts.packed_bytes == 0


def test_past_the_budget_ads_are_written_without_being_kept(dispatcher):
    answers = job_ad_answers(dispatcher)
    answers.texts.budget = 200
    ads = [classad2.parseOne(f'[N = {n}; S = "{"x" * n}"]') for n in range(50)]
    expected = by_spyne(dispatcher, ads)
    for _ in range(3):
        assert answers.write_job_ads([JobAdStruct(ad, NOW) for ad in ads]) == expected
    assert 0 < answers.texts.packed_bytes <= 200


def test_a_huge_ad_and_many_shapes(dispatcher, answers, monkeypatch):
    """A hostile ad (megabytes of text that does not compress, thousands of attributes) and ads unlike each other
    (the dictionary is replaced on the way) are written exactly."""
    monkeypatch.setattr(adcache, "REFRESH", 5)
    rng = random.Random(15)
    noise = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz<&>\"\\0123456789") for _ in range(1_000_000))
    huge = classad2.ClassAd()
    huge["Noise"] = noise
    for n in range(5000):
        huge[f"A{n}"] = n if n % 2 else f"value {n} & more"
    shapes = [classad2.parseOne("[" + "; ".join(f'X{rng.randrange(10**6)} = "{rng.getrandbits(128):x}"'
                                                for _ in range(20)) + "]") for _ in range(40)]
    ads = [huge, *shapes]
    expected = uncached(answers, ads)
    for _ in range(3):
        assert answers.write_job_ads([JobAdStruct(ad, NOW) for ad in ads]) == expected
    dictionaries = {entry.dictionary for entry in answers.texts._entries.values() if entry.dictionary}
    assert len(dictionaries) > 1
    retired = [dictionary for dictionary in dictionaries if dictionary is not answers.texts._dictionary]
    assert retired and all(dictionary.pack(b"x") is None for dictionary in retired)  # their compressors went


def test_threads_writing_while_ads_come_and_go(answers):
    ads = all_ads()
    expected = uncached(answers, ads)
    failures: list[bytes] = []

    def writer() -> None:
        for _ in range(200):
            body = answers.write_job_ads([JobAdStruct(ad, NOW) for ad in ads])
            if body != expected:
                failures.append(body)

    def churn() -> None:
        for n in range(3000):
            ad = classad2.parseOne(f"[N = {n}]")
            answers.write_job_ad(JobAdStruct(ad, NOW))
            answers.write_job_ad(JobAdStruct(ad, NOW))

    threads = [threading.Thread(target=writer) for _ in range(3)] + [threading.Thread(target=churn) for _ in range(2)]
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switching)
    assert not failures
    gc.collect()
    assert len(answers.texts) == len(ads)


def test_own_items_leave_out_what_every_answer_starts_with():
    ad = classad2.parseOne('[MyType = "Machine"; ServerTime = 1; TargetType = "Job"; ClaimId = "x"; A = 1]')
    assert own_items(ad) == b"<item><name>A</name><type>INTEGER-ATTR</type><value>1</value></item>"
