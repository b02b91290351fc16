"""Pure core of the transaction coordinator: no sockets, files, clocks or threads."""
