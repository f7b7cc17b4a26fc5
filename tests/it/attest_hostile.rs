//! Attacks on signed folders, analyze and the secret scrubbing, as a hostile implementation or
//! a forger would make them (issue 24).
