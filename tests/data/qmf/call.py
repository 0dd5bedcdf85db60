#!/usr/bin/env python
# Calls one QMF method the way console scripts do (qmf.console, Python 2) and prints its result as JSON:
#   call.py URL PACKAGE CLASS METHOD ARGUMENTS [SELECTORS]
# ARGUMENTS is a Python literal: a list (positional) or a dict (by name); SELECTORS a dict of property values that
# picks the object (the first of its class otherwise).  Exit 3: no such object.
import ast
import json
import sys

from qmf.console import Session

url, package, klass, method, arguments = sys.argv[1:6]
selectors = ast.literal_eval(sys.argv[6]) if len(sys.argv) > 6 else {}
arguments = ast.literal_eval(arguments)
session = Session()
broker = session.addBroker(url)
try:
    found = session.getObjects(_class=klass, _package=package, _timeout=30, **selectors)
    if not found:
        print json.dumps({"objects": 0})
        sys.exit(3)
    if isinstance(arguments, dict):
        result = found[0]._invoke(method, [], arguments)
    else:
        result = found[0]._invoke(method, arguments, {})
    print json.dumps({"status": result.status, "text": result.text, "out": result.outArgs}, default=repr)
finally:
    session.delBroker(broker)
