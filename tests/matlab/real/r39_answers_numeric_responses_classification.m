% Pattern: a MATLAB Answers question ("LSTM for data prediction"): two features per time step
% (a reading and a 0/1 flag) with numeric expected outputs, given to a network that ends in
% fullyConnectedLayer(1), softmaxLayer and classificationLayer; trainNetwork stops with
% "Invalid training data. Responses must be a vector of categorical responses, or a cell array
% of categorical response sequences." (The question's data, rounded and put into cells.)
% Source: MATLAB Answers.
% MATLAB: the layers are clean (analyzeNetwork reports nothing: the error is in the responses
% given to training), 5 layers (attnlab: 4, the classification output becomes the loss);
% lstm(100) on 2 channels 4*100*(2 + 100) + 400 = 41,200, fc 101: 41,301 learnables.
% Expect: exit 0 "4 layers" "no issues" learnables=41301
readings = [2.498 2.104 3.097 3.815 13.183 19.436 15.817 13.815 11.646 13.828 12.963 ...
    18.101 22.519 15.793 11.602 6.752 11.923 15.109 34.500 29.802 21.712 16.159 7.304 5.435];
flags = [1 0 0 0 0 0 0 0 0 0 0 1 0 1 1 1 0 0 0 0 0 1 1 1];
input = num2cell([readings; flags], 1)';
expectedOutput = [0; 0; 0; 0; 3.844; 1.097; 6.478; 4.433; 2.043; 3.816; 3.532; -0.291; ...
    3.259; -3.414; -7.107; -11.759; 2.067; 5.420; 14.165; 11.463; 3.373; -2.180; -11.036; -12.904];

layers = [ ...
    sequenceInputLayer(2)
    lstmLayer(100, 'OutputMode', 'last')
    fullyConnectedLayer(1)
    softmaxLayer
    classificationLayer]

option = trainingOptions('sgdm', 'MaxEpochs', 100);
net = trainNetwork(input, expectedOutput, layers, option);
