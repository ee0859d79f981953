"""What the gateway tells its operators about itself: metrics (`/metrics`)."""
