"""The analysis of ssbench runs: run directories in; tables, plots and a report out.

:func:`harness.analysis.job.analyze_result` is the whole job (``ssbench analyze``, ``spark-submit
harness/analysis/job.py`` and the notebook call it; it returns the tables as rows). Spark
reduces the samples (:mod:`.transforms`); everything else is plain Python over small rows:
:mod:`.tables`, :mod:`.comparisons`, :mod:`.diagnosis`, the plots and the report. Importing
this package does not import pyspark.
"""
