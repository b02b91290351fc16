"""Generated protobuf code (make proto). Do not edit."""
