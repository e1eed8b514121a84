"""The ``bread-stan`` command line, above the workflows and the reports it calls.

:mod:`.arguments` builds the parser (every subcommand and option); :mod:`.main` runs
the commands and holds the exit policy.  ``python -m bread_stan.cli`` runs it as the
``bread-stan`` console script does.
"""
