"""The Stan layer: find the toolchain, compile and cache programs, call them through the
C++ bridge, and build tempered targets, simulators and data from them; read and write
draws in Stan's shapes (CmdStan CSV, cmdstanpy, ArviZ).

Data flows on to ``kernels`` and ``ais``; nothing here imports from them.
"""
