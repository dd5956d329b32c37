"""What crosses between PEs: the transport over MPI (:mod:`.transport`), shared-memory
segments for large buffers between PEs of one node (:mod:`.shm`) and the codec of numpy
arguments (:mod:`.codec`)."""
