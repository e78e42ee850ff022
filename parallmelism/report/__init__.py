"""Reports: table writers and (at the edge) terminal tables."""
