"""Pure core of the offset manager: no sockets, files, clocks or threads."""
