"""Spark jobs over Riverbed topics (spark-submit scripts); see README "Spark"."""
