"""The read side: every read of the farm's records runs in one database snapshot."""
