"""Process accounting: which commands every node runs, and how often.

- ``pacct.py`` reads Linux BSD process accounting files (v3 records);
- ``proc_sampler.py`` samples /proc fast where accounting cannot be had;
- ``node_collector.py`` runs on a node for an interval, by the site's
  accounting file, our own (acct(2)) or /proc, and prints JSON;
- ``collect.py`` ships the collector through a transport to every node at
  once, parses the answers and stores them as a run;
- ``table.py`` is the asymmetry-ratio table (seaborg's), a pure reading of
  the stored counts that the ``process-asymmetry`` finding and the report
  share.

The first three are standard library only, for Python >= 3.6: they travel
to the nodes.  Nothing is imported here, so that the analysis can import
``table`` without the runners' dependencies.
"""
