"""Spark jobs over Riverbed topics (spark-submit scripts); see docs/spark/ (the data source and the jobs)."""
