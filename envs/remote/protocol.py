"""What both ends of a remote env agree on: the gRPC service, its methods and the channel options."""

SERVICE = "vla_rl.RemoteEnv"
METHODS = ("Ping", "Make", "Reset", "Step", "Observe", "Close")
#: gRPC channel and server options of both ends: messages up to 256 MiB (camera images).
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 256 * 2**20),
    ("grpc.max_receive_message_length", 256 * 2**20),
]
