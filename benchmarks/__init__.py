"""
The benchmarks behind every number in the READMEs, as one package: run each from the repository root as a module,
``python -m benchmarks.<script>`` (benchmarks/README.md lists them, what each measures, the command behind each
committed results file and its cost). Scripts import each other as ``benchmarks.<script>`` and share
``benchmarks.harness`` (results folder, thread pinning, machine label, date, command, results writer).
"""
