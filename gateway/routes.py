"""Every path a site serves, as one twisted.web resource tree: the transport's part, which knows no protocol.

```
/                       Branch: a name it does not hold goes to the fallback (the root's own requests too)
├─ <any other path>     the fallback: what a front end set (Birdbath's condorSchedd: gSOAP answered any path)
├─ <mounted>            Routes.mount(path, resource): any twisted.web resource a front end mounts
└─ <a document's name>  a GET whose last segment is one of ``documents`` (a WSDL's file name): that resource
```

The front ends fill it (:meth:`gateway.frontend.FrontEnd.mount`); what the gateway's port serves, path by path, is
said in ``docs/architecture.md``.  The collector's own port (``collector_port``) has a tree of its own.
"""

from __future__ import annotations

from twisted.web import resource

from gateway.http import Answering, Branch


class Unserved(Answering):
    """The fallback of a tree no front end gave one: every path below it too, a 404 to a GET (and 405 to a POST)."""

    isLeaf = True


class Routes:
    """A site's tree: ``root`` is what the site serves.  A front end mounts a resource at a path (:meth:`mount`),
    sets the ``fallback`` that answers every path no resource holds, and names ``documents`` a GET may ask for by
    file name at the end of any path."""

    def __init__(self) -> None:
        #: what answers a path no mounted resource holds: until a front end sets one, a 404 to a GET
        self.fallback: resource.Resource = Unserved()
        #: resources by the file name that ends a GET's path, whatever the path before it
        self.documents: dict[bytes, resource.Resource] = {}
        #: what the front ends serve, each in a few words (``GET /condorSchedd.wsdl``), for a 404 to say
        self.signposts: list[str] = []
        self.root = Branch(self)

    def mount(self, path: str, child: resource.Resource) -> resource.Resource:
        """Serve ``child`` at ``path`` (``/api/v1``) and, as twisted.web does, every path below it that ``child``
        takes (a leaf takes them all).  The segments on the way are :class:`Branch` es: a name they do not hold
        is the fallback's, as at the root."""
        *parents, name = path.strip("/").encode().split(b"/")
        node = self.root
        for parent in parents:
            step = node.children.get(parent)
            if step is None:
                step = Branch(self)
                node.putChild(parent, step)
            node = step
        node.putChild(name, child)
        return child
