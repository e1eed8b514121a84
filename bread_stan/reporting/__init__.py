"""What a user reads: figures and the Markdown/HTML reports of BREAD, protocol and AIDE
runs (the command line that writes them is :mod:`bread_stan.cli`).
"""
