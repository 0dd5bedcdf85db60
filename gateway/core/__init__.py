"""Protocol-free logic shared by every front end: statuses, ClassAd conversion, leases, authorisation."""
