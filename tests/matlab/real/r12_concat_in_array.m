% Pattern: a feature branch joined to a sequence LSTM that still outputs sequences, built as
% one layerGraph and made a dlnetwork at the end (as in the "sequence and tabular" question).
% MATLAB refuses the network at dlnetwork: the concatenation's inputs differ (one is a
% sequence); the usual fix is OutputMode="last" on the LSTM.
lgraph = layerGraph();
lgraph = addLayers(lgraph, [
    sequenceInputLayer(8, Name="seq")
    lstmLayer(10, Name="lstm")
    concatenationLayer(1, 2, Name="cat")
    fullyConnectedLayer(2, Name="fc")
    softmaxLayer(Name="sm")]);
lgraph = addLayers(lgraph, featureInputLayer(3, Name="tab"));
lgraph = connectLayers(lgraph, "tab", "cat/in2");
net = dlnetwork(lgraph);
