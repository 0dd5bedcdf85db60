"""What the Birdbath contracts accept beyond their shipped WSDLs, because gSOAP accepted it and old clients send it
(as HTCondor's own gSOAP server did): the one place those leniencies are written.

- Any Content-Type, any path (``http``); the operation element unqualified (``codec.operation_element``).
- Enumerations: the decimal C value of a value (``115`` for STRING-ATTR, ``5`` for VANILLA, ``1`` for MD5HASH),
  white space around it ignored, and a few names the WSDL does not list: both spellings of universe 12 (LOCAL, and
  LOCALUNIVESE as the WSDL spells it until 7.5.4) and ``MD5`` for MD5HASH (:data:`ENUM_ALIASES`).
- The collector reads the type of an ad and of its attributes as text, so that a value it does not know is a FAIL
  naming it, not a fault (:data:`READ_AS_TEXT`).
- Every member is optional and may be ``xsi:nil``; members are matched by local name in any namespace and order,
  unknown ones skipped; ``xsi:type`` is ignored (``xsd``).
"""

from __future__ import annotations

from gateway.core.adstruct import AttrType
from jobmodel.jobs import Universe

#: an enumeration's extra spellings, by its WSDL name: spelling -> the value it stands for
ENUM_ALIASES: dict[str, dict[str, str]] = {
    "ClassAdAttrType": {str(kind.code): kind.value for kind in AttrType},
    "UniverseType": {**{str(int(universe)): universe.name for universe in Universe},
                     Universe.LOCAL.name: Universe.LOCAL.name},
    "HashType": {"0": "NOHASH", "1": "MD5HASH", "MD5": "MD5HASH"},
}

#: the extra names an enumeration accepts as themselves (LOCAL is not in the WSDL's UniverseType)
EXTRA_VALUES: dict[str, frozenset[str]] = {"UniverseType": frozenset({Universe.LOCAL.name})}

#: per contract, the enumerations read as plain text (the service checks them and answers FAIL)
READ_AS_TEXT: dict[str, frozenset[str]] = {"condorCollector": frozenset({"ClassAdAttrType", "ClassAdType"})}
