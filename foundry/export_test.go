package foundry

// CanceledOutputForTest is the output sent for a call canceled by a stop.
var CanceledOutputForTest = canceledOutput
