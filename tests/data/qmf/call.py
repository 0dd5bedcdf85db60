#!/usr/bin/env python
# Calls QMF methods the way console scripts do (qmf.console, Python 2) and prints each result as one JSON line:
#   call.py URL < CALLS
# CALLS is a Python literal list of (package, class, method, arguments, selectors): arguments a list (positional)
# or a dict (by name), selectors a dict of property values that picks the object (else the first of its class).
# A call that raises in the console prints {"raised": text}; no object prints {"objects": 0}.
import ast
import json
import sys

from qmf.console import Session

session = Session()
broker = session.addBroker(sys.argv[1])
try:
    for package, klass, method, arguments, selectors in ast.literal_eval(sys.stdin.read()):
        try:
            found = session.getObjects(_class=klass, _package=package, _timeout=30, **selectors)
            if not found:
                print json.dumps({"objects": 0})
                continue
            if isinstance(arguments, dict):
                result = found[0]._invoke(method, [], dict(arguments, _timeout=30))
            else:
                result = found[0]._invoke(method, arguments, {"_timeout": 30})
            print json.dumps({"status": result.status, "text": result.text, "out": result.outArgs}, default=repr)
        except Exception, exc:
            print json.dumps({"raised": str(exc)})
        sys.stdout.flush()
finally:
    session.delBroker(broker)
