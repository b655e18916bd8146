"""One module per ``ssbench`` subcommand (``register`` + ``cmd_<name>``)."""
