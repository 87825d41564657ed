"""How fast: roofline bounds and estimates for every option, and rental prices."""
