"""What a user reads: figures, the Markdown/HTML reports of BREAD and protocol runs, and
the ``bread-stan`` command line.
"""
