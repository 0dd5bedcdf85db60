"""The Birdbath wire types (namespace ``urn:condor``) as spyne models.

They drive parsing and serialisation only; the WSDL clients see is the static file in ``wsdl/``, which a test
proves equal to the one HTCondor shipped.  Output fields are not nillable, so a ``None`` is omitted as gSOAP 2.7
omitted NULL pointers; inputs that clients send as ``xsi:nil`` are nillable.
"""

from __future__ import annotations

from spyne import Array, ByteArray, ComplexModel, Enum, Integer32, Long, Unicode

from gateway.core.adstruct import AttrType
from gateway.core.status import StatusCode as CoreStatusCode
from jobmodel.jobs import Universe

TNS = "urn:condor"

StatusCode = Enum(*[code.value for code in CoreStatusCode], type_name="StatusCode")
ClassAdAttrType = Enum(*[t.value for t in AttrType], type_name="ClassAdAttrType")
HashType = Enum("NOHASH", "MD5HASH", type_name="HashType")
#: both spellings of universe 12 are accepted (LOCALUNIVESE until 7.5.4, LOCAL after)
UniverseType = Enum(*[u.name for u in Universe], "LOCALUNIVESE", type_name="UniverseType")


class _Model(ComplexModel):
    __namespace__ = TNS


class Status(_Model):
    _type_info = [("code", StatusCode), ("message", Unicode)]


class ClassAdStructAttr(_Model):
    _type_info = [("name", Unicode), ("type", ClassAdAttrType), ("value", Unicode)]


ClassAdStruct = Array(ClassAdStructAttr, member_name="item", type_name="ClassAdStruct")
ClassAdStructArray = Array(ClassAdStruct, member_name="item", type_name="ClassAdStructArray")
Requirements = Array(Unicode, member_name="item", type_name="Requirements")


class FileInfo(_Model):
    _type_info = [("name", Unicode), ("size", Long)]


FileInfoArray = Array(FileInfo, member_name="item", type_name="FileInfoArray")


class Transaction(_Model):
    _type_info = [("id", Integer32), ("duration", Integer32)]


class StringAndStatus(_Model):
    _type_info = [("status", Status), ("message", Unicode)]


class TransactionAndStatus(_Model):
    _type_info = [("status", Status), ("transaction", Transaction)]


class IntAndStatus(_Model):
    _type_info = [("status", Status), ("integer", Integer32)]


class ClassAdStructAndStatus(_Model):
    _type_info = [("status", Status), ("classAd", ClassAdStruct)]


class ClassAdStructArrayAndStatus(_Model):
    _type_info = [("status", Status), ("classAdArray", ClassAdStructArray)]


class RequirementsAndStatus(_Model):
    _type_info = [("status", Status), ("requirements", Requirements)]


class Base64DataAndStatus(_Model):
    _type_info = [("status", Status), ("data", ByteArray)]


class FileInfoArrayAndStatus(_Model):
    _type_info = [("status", Status), ("info", FileInfoArray)]


#: request parameter types that clients may send as ``xsi:nil``
NullableTransaction = Transaction.customize(nillable=True)
NullableClassAdStruct = ClassAdStruct.customize(nillable=True)
