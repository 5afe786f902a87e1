% 1-D convolution, GRU, dropout; a cell array of names and a switch
kind = "gru";
names = {'conv', 'rnn', 'fc'};
switch kind
    case "lstm"
        rnn = lstmLayer(8, OutputMode="last", Name=names{2});
    otherwise
        rnn = gruLayer(8, OutputMode="last", Name=names{2});
end
layers = [sequenceInputLayer(3, Name="in")
          convolution1dLayer(3, 6, Padding="causal", Name=names{1})
          rnn
          dropoutLayer(0.1, Name="drop")
          fullyConnectedLayer(2, Name=names{3})];
net = dlnetwork(layers);
