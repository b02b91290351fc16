"""Pure core of the group coordinator: no sockets, files, clocks or threads."""
