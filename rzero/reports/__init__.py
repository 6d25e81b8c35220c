"""The run's reports, rebuilt from its folder."""
